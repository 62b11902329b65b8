# For the end-to-end tests (test/cable_test.go) only: tells a subscriber
# which process serves its connection, so that a test can see it has
# subscribers on every worker.
class ProbeChannel < ApplicationCable::Channel
  def subscribed
    return reject unless ENV["RUVOY_TEST_PROBES"]

    transmit({ pid: Process.pid })
  end
end
