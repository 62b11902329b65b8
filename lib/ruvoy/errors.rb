# frozen_string_literal: true

module Ruvoy
  # Raised at boot when the rackup cannot become an app.
  class BootError < StandardError; end

  # The fields of a log entry for an exception: name/value pairs.
  def self.error_fields(exception)
    fields = ["error_class", exception.class.name.to_s, "error", exception.message.to_s,
              "backtrace", (exception.backtrace || []).join("\n")]
    if exception.cause
      fields.push("cause", "#{exception.cause.class}: #{exception.cause.message}")
    end
    fields
  end

  class << self
    # The directory of the rackup last loaded: frames under it (and not in
    # its vendor/) are the app's.
    attr_accessor :app_root
  end

  HOLD_FRAMES = 10

  # A hold warning's backtrace, brief: the app's own frames first (up to
  # HOLD_FRAMES), then how many frames of gems and Ruby it left out. With
  # no frame of the app's, the first HOLD_FRAMES as they are.
  def self.hold_frames(backtrace)
    root = app_root && "#{app_root}/"
    own = root ? backtrace.select { |f| f.start_with?(root) && !f.include?("/vendor/") } : []
    own = backtrace if own.empty?
    shown = own.first(HOLD_FRAMES)
    left = backtrace.size - shown.size
    left.positive? ? shown + ["(#{left} more frames, in gems and Ruby)"] : shown
  end

  # What a boot failure prints: the error and its backtrace, as ruby would.
  def self.describe_boot_error(exception)
    # ruvoy's own refusal (no rackup, not an app) has no backtrace worth
    # showing: its frames are ruvoy's.
    return "#{exception.message}\n" if exception.is_a?(BootError)

    exception.full_message(highlight: false, order: :top)
  end
end
