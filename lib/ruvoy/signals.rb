# frozen_string_literal: true

module Ruvoy
  # The server owns these signals (stop, reload, Go's own preemption); an app
  # that traps one gets a warning instead of taking it away.
  SERVER_SIGNALS = %w[INT TERM QUIT HUP USR1 USR2 URG PIPE].freeze

  module TrapGuard
    def trap(signal, *args, &block)
      name = Ruvoy.signal_name(signal)
      if SERVER_SIGNALS.include?(name)
        warn "ruvoy: ignoring trap(#{name}) from #{caller(1, 1).first}: the server handles SIG#{name}"
        return "DEFAULT"
      end
      previous = super
      Ruvoy._signal_fixup(Signal.list.fetch(name, 0))
      previous
    end
  end

  def self.signal_name(signal)
    name = signal.is_a?(Integer) ? Signal.signame(signal).to_s : signal.to_s
    name.delete_prefix("SIG")
  end

  Signal.singleton_class.prepend(TrapGuard)
  Kernel.singleton_class.prepend(TrapGuard)
  Kernel.prepend(TrapGuard)
end
