# frozen_string_literal: true

module Ruvoy
  # The stream a Rack 3 streaming body (body.call(stream)) writes to and
  # reads the request body from: full duplex where the client streams too.
  class StreamIO
    def initialize(id)
      @id = id
      @input = Input.new(id)
      @write_closed = false
      @read_closed = false
    end

    def write(*chunks)
      raise IOError, "not opened for writing" if @write_closed

      chunks.sum do |chunk|
        chunk = chunk.to_s
        Ruvoy._write(@id, chunk)
        chunk.bytesize
      end
    end

    def <<(chunk)
      write(chunk)
      self
    end

    def flush = self

    def read(length = nil, buffer = nil)
      raise IOError, "not opened for reading" if @read_closed

      @input.read(length, buffer)
    end

    def readpartial(maxlen, buffer = nil)
      raise IOError, "not opened for reading" if @read_closed

      @input.readpartial(maxlen, buffer)
    end

    def close_read
      @read_closed = true
      nil
    end

    def close_write
      @write_closed = true
      nil
    end

    def close
      close_read
      close_write
    end

    def closed? = @read_closed && @write_closed
  end

  def self.stream_io(id) = StreamIO.new(id)
end
