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

  # What a boot failure prints: the error and its backtrace, as ruby would.
  def self.describe_boot_error(exception)
    # ruvoy's own refusal (no rackup, not an app) has no backtrace worth
    # showing: its frames are ruvoy's.
    return "#{exception.message}\n" if exception.is_a?(BootError)

    exception.full_message(highlight: false, order: :top)
  end
end
