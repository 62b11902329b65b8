# frozen_string_literal: true

module Ruvoy
  # Rails under ruvoy: requests are fibers on one thread, so what Rails keys
  # by thread must be keyed by fiber.
  #
  # Rails 7+ does this itself with config.active_support.isolation_level =
  # :fiber (ruvoy warns when it is not set). Rails 6.1 keys Active Record
  # connections by thread, so fibers interleaving on the VM thread would
  # share one connection, and one request's transaction would take in
  # another's queries. For Rails < 7, ruvoy makes each fiber lease its own
  # connection: the pool's cache is keyed by fiber, the connection's owner
  # is the fiber (the reaper takes back connections of fibers that died),
  # a request releases its connection when it ends, as a thread would, and
  # a code reload takes the reloading fiber's connections for its own.
  module RailsSupport
    # Rails rescues every exception into an error page (500); the request
    # timeout and the stop's are the server's, and answer 503.
    def self.map_interruptions
      return unless defined?(::ActionDispatch::ExceptionWrapper)

      responses = ::ActionDispatch::ExceptionWrapper.rescue_responses
      responses["Ruvoy::RequestTimeout"] ||= :service_unavailable
      responses["Ruvoy::Shutdown"] ||= :service_unavailable
    end

    module PoolByFiber
      private

      def connection_cache_key(thread)
        thread.equal?(Thread.current) ? Fiber.current : thread
      end

      # A code reload (clear_reloadable_connections!) and a disconnect take
      # every connection of the pool first, counting as the caller's own
      # those whose owner is Thread.current. Here the owner is a fiber, so
      # the reloading request's own connection (Base.clear_cache! leased it
      # just before) was waited for as if another's: 2 x checkout_timeout
      # (10 s) with new connections blocked, and the requests that came
      # meanwhile timed out (ActiveRecord::ConnectionTimeoutError). Lent to
      # the thread for the count, the fiber's connections are its own
      # again before the caller uses them.
      def attempt_to_checkout_all_existing_connections(*)
        mine = synchronize { @connections.select { |conn| conn.owner.equal?(Fiber.current) } }
        mine.each { |conn| conn._ruvoy_owner = Thread.current }
        super
      ensure
        mine&.each { |conn| conn._ruvoy_owner = Fiber.current if conn.owner.equal?(Thread.current) }
      end
    end

    # Rails 6.1's AbstractAdapter#lease, #expire and #steal!, with the
    # fiber where they have Thread.current.
    module ConnectionOwnedByFiber
      def lease
        if in_use?
          raise ::ActiveRecord::ActiveRecordError,
                "Cannot lease connection, it is already in use by #{@owner.equal?(Fiber.current) ? "this fiber" : @owner}"
        end

        @owner = Fiber.current
      end

      def expire
        raise ::ActiveRecord::ActiveRecordError, "Cannot expire connection, it is not currently leased." unless in_use?
        unless @owner.equal?(Fiber.current)
          raise ::ActiveRecord::ActiveRecordError,
                "Cannot expire connection, it is owned by another fiber: #{@owner}. Current fiber: #{Fiber.current}."
        end

        @idle_since = Concurrent.monotonic_time
        @owner = nil
      end

      def steal!
        raise ::ActiveRecord::ActiveRecordError, "Cannot steal connection, it is not currently leased." unless in_use?
        return if @owner.equal?(Fiber.current)

        pool.send(:remove_connection_from_thread_cache, self, @owner)
        @owner = Fiber.current
      end

      # PoolByFiber's exclusive checkout.
      def _ruvoy_owner=(owner)
        @owner = owner
      end
    end

    # `rails server -u ruvoy` in development: requests, SQL and errors go to
    # the console as well as to log/, as Rails' own server sends them.
    def self.log_to_stdout
      return unless ENV["RUVOY_LOG_TO_STDOUT"] == "1" && defined?(::Rails) && ::Rails.respond_to?(:logger)

      logger = ::Rails.logger
      return if logger.nil? || ::ActiveSupport::Logger.logger_outputs_to?(logger, $stdout)

      $stdout.sync = true # a line as it is logged, as on a terminal
      console = ::ActiveSupport::Logger.new($stdout)
      console.formatter = logger.formatter
      console.level = logger.level
      if logger.respond_to?(:broadcast_to) # Rails 7.1+
        logger.broadcast_to(console)
      else
        logger.extend(::ActiveSupport::Logger.broadcast(console))
      end
    end

    def self.install
      map_interruptions
      log_to_stdout
      return unless defined?(::Rails::VERSION) && defined?(::ActiveRecord::ConnectionAdapters::ConnectionPool)

      if ::Rails::VERSION::MAJOR >= 7
        level = ::ActiveSupport::IsolatedExecutionState.isolation_level rescue nil
        unless level == :fiber
          warn "ruvoy: set config.active_support.isolation_level = :fiber: requests are fibers, " \
               "and with :thread they share one Active Record connection"
        end
        return
      end
      return if ::ActiveRecord::ConnectionAdapters::ConnectionPool < PoolByFiber

      # Connections checked out while the app loaded belong to the thread.
      ::ActiveRecord::Base.connection_handler.clear_active_connections!
      ::ActiveRecord::ConnectionAdapters::ConnectionPool.prepend(PoolByFiber)
      ::ActiveRecord::ConnectionAdapters::AbstractAdapter.prepend(ConnectionOwnedByFiber)
    end
  end
end
