# frozen_string_literal: true

module Ruvoy
  # Rack::Timeout under ruvoy. Rack::Timeout times a request out by raising
  # into the thread that runs it (Thread#raise from its scheduler thread);
  # under ruvoy every request runs on one thread, each in its own fiber, so
  # the raise would land in whichever request runs at that moment. This
  # makes it raise into the request it timed, running or waiting.
  module RackTimeout
    # Stands in for the request's thread where Rack::Timeout's timeout
    # action calls #raise on it.
    class Target
      def initialize(request) = @request = request

      def raise(exception = RuntimeError, message = nil, *)
        exc = message ? exception.exception(message) : exception.exception
        Ruvoy._raise_in_request(@request, exc)
      end
    end

    # Rack::Timeout::Scheduler::Timeout#timeout, with the request's Target
    # in place of Thread.current when called in a request's fiber.
    module TimeoutInRequest
      def timeout(secs, &block)
        request = Ruvoy._current_request
        return super unless request && secs && !secs.zero? && @scheduler && @on_timeout

        target = Target.new(request)
        job = @scheduler.run_in(secs) { @on_timeout.call(target) }
        block.call
      ensure
        job&.cancel!
      end
    end

    def self.install
      return unless defined?(::Rack::Timeout::Scheduler::Timeout)
      return if ::Rack::Timeout::Scheduler::Timeout < TimeoutInRequest

      ::Rack::Timeout::Scheduler::Timeout.prepend(TimeoutInRequest)
    end
  end
end
