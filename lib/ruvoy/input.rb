# frozen_string_literal: true

require "tempfile"
require "tmpdir"

module Ruvoy
  # rack.input for a request with a body. Bytes arrive from the server as
  # the app reads; what was read is kept so that rewind works: in memory up to
  # MEMORY_LIMIT, then in an unlinked temporary file, released when the
  # request ends.
  class Input
    MEMORY_LIMIT = REWIND_IN_MEMORY # the server counts it: internal/vm/wire.h

    def initialize(id)
      @id = id
      @kept = String.new(encoding: Encoding::BINARY)
      @file = nil
      @size = 0   # bytes taken from the server so far
      @pos = 0    # where the app reads next
      @eof = false
    end

    def gets
      searched = @pos
      loop do
        newline = find_newline(searched)
        return take(newline + 1 - @pos) if newline
        return(@pos < @size ? take(@size - @pos) : nil) if @eof

        searched = @size
        fill(@size + 1)
      end
    end

    def read(length = nil, buffer = nil)
      raise ArgumentError, "negative length #{length} given" if length&.negative?

      if length.nil?
        fill(nil)
        n = @size - @pos
      elsif length.zero?
        n = 0
      else
        fill(@pos + length)
        return buffer&.clear && nil if @pos >= @size

        n = [length, @size - @pos].min
      end
      take(n, buffer)
    end

    # Whatever has arrived, up to maxlen bytes, waiting only while nothing
    # has; EOFError at the end (as IO#readpartial).
    def readpartial(maxlen, buffer = nil)
      fill(@size + 1) if @pos >= @size
      raise EOFError, "end of request body reached" if @pos >= @size

      take([maxlen, @size - @pos].min, buffer)
    end

    def each
      while (line = gets)
        yield line
      end
    end

    def rewind
      @pos = 0
    end

    def close; end

    def external_encoding = Encoding::BINARY
    def binmode = self
    def binmode? = true

    # Called by the server when the request ends.
    def _release
      @file&.close
      @file = nil
      @kept&.clear
      @kept = nil
    end

    private

    # The next length bytes, in buffer when given.
    def take(length, buffer = nil)
      buffer ||= String.new(encoding: Encoding::BINARY)
      buffer.force_encoding(Encoding::BINARY)
      if length.zero?
        buffer.clear
      elsif @file
        @file.pread(length, @pos, buffer)
      else
        buffer.replace(@kept.byteslice(@pos, length))
      end
      @pos += length
      buffer
    end

    # Reads from the server until `target` bytes are kept (all when nil).
    def fill(target)
      until @eof || (target && @size >= target)
        chunk = Ruvoy._read_chunk(@id)
        next @eof = true unless chunk

        keep(chunk)
      end
    end

    # Keeps a chunk for rewind. Chunks are cleared once copied: large
    # uploads then do not wait for the GC to give memory back. The first
    # chunk is kept as it came, so that what is kept in memory never holds
    # more than MEMORY_LIMIT and a String's slack (appending to a small
    # String doubles its capacity past what it holds).
    def keep(chunk)
      if @file.nil? && @size + chunk.bytesize > MEMORY_LIMIT
        @file = Input.anonymous_file
        @file.write(@kept)
        @kept.clear
        @kept = nil
      end
      size = chunk.bytesize
      if @file
        @file.pwrite(chunk, @size)
        chunk.clear
      elsif @kept.empty?
        @kept = chunk
      else
        @kept << chunk
        chunk.clear
      end
      @size += size
    end

    # An unlinked temporary file: O_TMPFILE where the file system has it
    # (one system call), else Tempfile's create and unlink.
    def self.anonymous_file
      file = begin
        File.open(Dir.tmpdir, File::RDWR | File::TMPFILE, 0o600)
      rescue NameError, SystemCallError
        Tempfile.create("ruvoy-body").tap { |f| File.unlink(f.path) }
      end
      file.binmode
    end

    def slice(offset, length)
      return @kept.byteslice(offset, length) unless @file

      @file.pread(length, offset).force_encoding(Encoding::BINARY)
    end

    # Offset of the first "\n" at or after `from` in what is kept, or nil.
    def find_newline(from)
      return @kept.index("\n", from) unless @file

      while from < @size
        window = slice(from, [64 * 1024, @size - from].min)
        at = window.index("\n")
        return from + at if at

        from += window.bytesize
      end
      nil
    end
  end

  # rack.input for a request without a body.
  class EmptyInput
    def gets = nil
    def each; end
    def rewind = 0
    def close; end
    def external_encoding = Encoding::BINARY
    def binmode = self
    def binmode? = true

    def read(length = nil, buffer = nil)
      buffer&.clear
      return nil if length&.positive?

      buffer || String.new(encoding: Encoding::BINARY)
    end
  end

  EMPTY_INPUT = EmptyInput.new.freeze
end
