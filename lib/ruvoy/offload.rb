# frozen_string_literal: true

module Ruvoy
  # Runs blocks on a pool of Ruby threads while the calling fiber waits in
  # the scheduler, so a C call that blocks without knowing about fibers (a
  # database driver's synchronous query) stalls only its own request.
  #
  #   DATABASE = Ruvoy::Offload.new(limit: 16)
  #   rows = DATABASE.call { connection.sync_exec(sql) }
  #
  # At most `limit` blocks run at once; callers beyond wait their turn, in
  # order. Threads are made as needed and kept for reuse. The block's value
  # is returned and its exception raised in the caller. A call cannot be cut
  # short: an exception meant for the caller (its client left, a Timeout)
  # waits until the block is done, so a connection the block uses is never
  # handed back while in use. The block runs on another thread: its
  # thread-locals and fiber-locals are that thread's, not the caller's. Only
  # C calls that release the GVL while they block let the other requests go
  # on; one that holds the GVL stalls every thread.
  class Offload
    # A block on its way through the pool.
    class Job
      attr_reader :done

      def initialize(block)
        @block = block
        @done = Thread::Queue.new
      end

      def run
        @done << [true, @block.call]
      rescue Exception => e # rubocop:disable Lint/RescueException -- it belongs to the caller
        @done << [false, e]
      end
    end

    attr_reader :limit

    def initialize(limit:)
      raise ArgumentError, "limit must be a positive Integer" unless limit.is_a?(Integer) && limit.positive?

      @limit = limit
      start
    end

    def call(&block)
      raise ArgumentError, "Ruvoy::Offload#call needs a block" unless block

      # A pool used before a fork (an app that offloads while it loads, under
      # --preload) has no threads in the child: it starts again there.
      start if @pid != Process.pid
      job = Job.new(block)
      Ruvoy._offload_waiting(1)
      grow = @mutex.synchronize do
        @queued += 1
        next false unless @queued > @idle && @threads < @limit

        @threads += 1
        @idle += 1
      end
      @jobs << job
      Thread.new { work } if grow
      ok, result = wait(job)
      raise result unless ok

      result
    end

    private

    def start
      @pid = Process.pid
      @jobs = Thread::Queue.new
      @mutex = Thread::Mutex.new
      @threads = 0 # threads made
      @idle = 0    # of them, those waiting for a job
      @queued = 0  # jobs no thread has taken yet
    end

    def work
      Thread.current.name = "ruvoy-offload"
      loop do
        job = @jobs.pop
        @mutex.synchronize do
          @queued -= 1
          @idle -= 1
        end
        Ruvoy._offload_waiting(-1)
        Ruvoy._offload_busy(1)
        begin
          job.run
        ensure
          Ruvoy._offload_busy(-1)
          @mutex.synchronize { @idle += 1 }
        end
      end
    end

    # The job's outcome; an exception raised into the waiting fiber is held
    # until the job is done, then raised.
    def wait(job)
      interrupted = nil
      begin
        outcome = job.done.pop
      rescue Exception => e # rubocop:disable Lint/RescueException -- re-raised below
        interrupted ||= e
        retry
      end
      raise interrupted if interrupted

      outcome
    end
  end

  DEFAULT_OFFLOAD_THREADS = Integer(ENV.fetch("RUVOY_OFFLOAD_THREADS", "64"))

  # Runs the block on the shared pool (RUVOY_OFFLOAD_THREADS threads at
  # most, default 64). See Ruvoy::Offload.
  def self.offload(&block)
    @offload ||= Offload.new(limit: DEFAULT_OFFLOAD_THREADS)
    @offload.call(&block)
  end
end
