# frozen_string_literal: true

module Ruvoy
  # The Ruby half of the Fiber scheduler (the rest is C: rv_scheduler.c).
  # These hooks block in C calls that know nothing of fibers, so they run on
  # a short-lived thread while the fiber waits for it.
  class Scheduler
    def address_resolve(hostname)
      Thread.new { Addrinfo.getaddrinfo(hostname, nil).map(&:ip_address).uniq }.value
    end

    def process_wait(pid, flags)
      Thread.new { Process::Status.wait(pid, flags) }.value
    end

    def close; end
  end
end
