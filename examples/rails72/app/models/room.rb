# Rooms are not stored: any well-formed name is a room.
module Room
  NAME = /\A[a-z0-9_-]{1,40}\z/

  def self.valid_name?(name)
    NAME.match?(name)
  end
end
