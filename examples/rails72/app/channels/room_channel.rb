# A chat room: subscribers get what MessagesController#create broadcasts
# to their room.
class RoomChannel < ApplicationCable::Channel
  def self.broadcasting_for_room(room)
    "room:#{room}"
  end

  def subscribed
    room = params[:room].to_s
    return reject unless Room.valid_name?(room)

    stream_from RoomChannel.broadcasting_for_room(room)
  end
end
