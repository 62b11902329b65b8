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

  HOLD_OFFLOAD = "the VM thread is held by one request: other requests wait (wrap blocking calls in Ruvoy.offload)"
  HOLD_LOADING = "the VM thread is held by one request loading or compiling code (require, autoload, " \
                 "templates, assets): other requests wait; load it at boot (Rails: config.eager_load)"
  HOLD_DEVELOPMENT = "a request held the VM thread with development's own work (code loaded or compiled on " \
                     "first use: require, autoload, templates, assets; an error page): Ruvoy.offload cannot " \
                     "help there, and such holds are not reported again (other holds are)"

  # Frames of code being loaded or compiled: a file required, autoloaded
  # or loaded, or its top level running (not a block it defined, which
  # runs later: "block in <top (required)>"); a template compiled (Action
  # View, ERB, Erubi, Tilt and the engines it runs), a frame of a
  # template engine's own method of that name; assets (Sprockets, Sass).
  # Ruby 3.4 quotes labels 'Kernel#require', earlier ones `require'.
  LOADING_METHODS = %w[require require_relative load autoload const_missing load_missing_constant
                       require_dependency].freeze
  COMPILING_METHODS = %w[compile compile! compiled_method compile_template_method precompiled prepare].freeze
  METHOD_LABEL = "in [`'](?:block (?:\\(\\d+ levels\\) )?in )?(?:[\\w:]+[#.])?"
  LOADING_LABEL = /#{METHOD_LABEL}#{Regexp.union(LOADING_METHODS)}'|in [`']<top \(required\)>'/
  COMPILING_LABEL = %r{/(?:action_?view|erb|erubi|tilt|haml|slim|liquid|mustache|jbuilder)[-/.][^:]*:\d+:#{METHOD_LABEL}#{Regexp.union(COMPILING_METHODS)}'}
  LOADING_PATH = %r{/(?:sprockets|sassc?)[-/][^/]*}

  # Frames of development's error pages being made (Rails', Rack's): not
  # their middleware's call, which every request passes through.
  ERROR_PAGE = %r{/action_dispatch/middleware/exception_wrapper\.rb:|
                  /(?:action_dispatch/middleware/debug_exceptions|rack/show_exceptions)\.rb:\d+:in\ [`'](?!(?:[\w:]+[\#.])?call')}x

  # The first frame that loads or compiles code, or nil.
  def self.loading_frame(backtrace)
    backtrace.find { |f| LOADING_LABEL.match?(f) || COMPILING_LABEL.match?(f) || LOADING_PATH.match?(f) }
  end

  # What the hold detector says of the code holding the VM thread, from
  # its backtrace: [level (:warn, :info), message, frames], or nil for
  # nothing. Loading code holds the thread, and no offload helps: in
  # development, where code loads on first use (and error pages render
  # backtraces), that is said once, at :info; elsewhere it is a warning to
  # load that code at boot. Any other hold gets the offload advice.
  # The frames shown begin with the one that loads, when it is not the
  # app's own; development's line shows that frame alone.
  def self.hold_report(backtrace)
    frames = hold_frames(backtrace)
    loading = loading_frame(backtrace)
    frames = [loading] + frames if loading && !frames.include?(loading)
    page = backtrace.find { |f| ERROR_PAGE.match?(f) }
    if (ENV["RAILS_ENV"] || ENV["RACK_ENV"]) == "development" && (loading || page)
      return nil if @development_hold_told

      @development_hold_told = true
      return [:info, HOLD_DEVELOPMENT, [loading || page]] # the frame that tells, alone: it is said once, in passing
    end
    [:warn, loading ? HOLD_LOADING : HOLD_OFFLOAD, frames]
  end

  # Frames of Bundler's own code, and of the require that loaded it.
  BUNDLER_FRAME = %r{/lib/bundler(?:/|\.rb:)|^<internal:[^>]*kernel_require}

  # What a boot failure prints after "config.ru failed to load: ": the
  # error in one line (its message's first, and its class), the rest of
  # its message, then the backtrace, one frame a line, without ruvoy's
  # own loader. A Bundler error (a gem missing, a Gemfile that does not
  # resolve) is Bundler's report: its frames are Bundler's workings, and
  # the Gemfile it read is named instead.
  def self.describe_boot_error(exception)
    # ruvoy's own refusal (no rackup, not an app) has no backtrace worth
    # showing: its frames are ruvoy's.
    return "#{exception.message}\n" if exception.is_a?(BootError)

    bundler = defined?(::Bundler::BundlerError) && exception.is_a?(::Bundler::BundlerError)
    first, rest = exception.message.to_s.split("\n", 2)
    text = +"#{first} (#{exception.class})\n"
    text << rest.chomp << "\n" if rest && !rest.strip.empty?
    frames = (exception.backtrace || []).reject { |f| f.start_with?("<ruvoy>/") || (bundler && BUNDLER_FRAME.match?(f)) }
    text << "\tBundler read #{ENV["BUNDLE_GEMFILE"]}\n" if bundler && ENV["BUNDLE_GEMFILE"]
    frames.each { |f| text << "\t" << f << "\n" }
    if (cause = exception.cause)
      text << "\tcaused by: #{cause.message.to_s.lines.first&.chomp} (#{cause.class})\n"
    end
    text
  end
end
