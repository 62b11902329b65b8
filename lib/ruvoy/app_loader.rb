# frozen_string_literal: true

module Ruvoy
  # Builds the Rack app from a rackup file, as rackup does: Bundler first when
  # a Gemfile sits beside it (or BUNDLE_GEMFILE names one), then Rack, then
  # Rack::Builder.parse_file. A config reload calls this again in the same VM.
  def self.load_app(rackup, environment)
    ENV["RACK_ENV"] = environment if environment && !environment.empty?
    # What the app writes to STDOUT goes out as it is written, as under
    # Puma: Rails 7.1 and later log there in production, and a log line
    # held in Ruby's buffer reaches no one until it fills.
    $stdout.sync = true
    path = File.expand_path(rackup)
    raise BootError, "no rackup file at #{path}" unless File.file?(path)

    setup_bundler(File.dirname(path))
    require "rack"
    require "uri" # Rack 2.2's Lint uses URI without requiring it; rackup loads it
    built = Rack::Builder.parse_file(path)
    # Rack 2 returns [app, options], Rack 3 the app alone.
    app = built.is_a?(Array) && built.size == 2 && built[1].is_a?(Hash) ? built[0] : built
    raise BootError, "#{path} did not build a Rack app (got #{app.inspect})" unless app.respond_to?(:call)

    # In development an exception shows its class, message and backtrace to
    # the client (HTML to a browser, text otherwise), as under rackup and
    # Puma. Rails answers with its own page before this one sees anything.
    app = Rack::ShowExceptions.new(app) if ENV["RACK_ENV"] == "development"

    RailsSupport.install
    RackTimeout.install
    Ruvoy.app_root = File.dirname(path)
    @app = app # for Ruvoy.warm, in a --preload template
    _app_loaded
    app
  end

  def self.setup_bundler(dir)
    return if @bundler_set_up

    @bundler_set_up = true
    gemfile = ENV["BUNDLE_GEMFILE"]
    gemfile ||= %w[Gemfile gems.rb].map { |name| File.join(dir, name) }.find { |f| File.file?(f) }
    return unless gemfile

    ENV["BUNDLE_GEMFILE"] = File.expand_path(gemfile)
    require "bundler/setup"
  end

  # Env values that never change in this process.
  def self.env_constants
    rack3_1 = Gem::Version.new(Rack.release) >= Gem::Version.new("3.1")
    {
      version: [1, 3].freeze,
      software: "ruvoy/#{VERSION}",
      # OPTIONS *: Rack 3.1's SPEC gives PATH_INFO "*"; earlier SPECs have no
      # asterisk form, and their Lint accepts only "" or a path.
      asterisk_path_info: rack3_1 ? "*" : "",
    }.freeze
  end
end
