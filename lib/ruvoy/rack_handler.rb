# frozen_string_literal: true

# Ruvoy::RackHandler: what `rackup -s ruvoy` and `rails server -u ruvoy`
# run, as the handler Rackup::Handler::Ruvoy (rackup 2, Rack 3's:
# lib/rackup/handler/ruvoy.rb) or Rack::Handler::Ruvoy (Rack 2:
# lib/rack/handler/ruvoy.rb), each a module that extends this one. It replaces the process with
# the ruvoy server, which loads the rackup itself in its own embedded VM
# (the app the caller built is left behind), mapping rackup's and Rails'
# options onto ruvoy's flags. Not part of the runtime the binary embeds.
module Ruvoy
  module RackHandler
    # app is what rackup built, or nil from `rails server` (below).
    def run(app, **options)
      # Rails' server logs requests to the console in development; ruvoy's
      # Rails support does the same when asked (lib/ruvoy/rails_support.rb).
      ENV["RUVOY_LOG_TO_STDOUT"] = "1" if options[:log_stdout]
      exec(*command(options, rackup: !app.nil?))
    end

    def command(options, rackup: false)
      args = [binary]
      args.push("-p", options[:Port].to_s) if options[:Port]
      args.push("-a", options[:Host].to_s) if options[:Host]
      args.push("-e", options[:environment].to_s) if options[:environment]
      # rackup wraps the app in Rack::CommonLogger in development and
      # deployment unless -q (its logging_middleware): a line a request,
      # which ruvoy then writes in the app's place.
      args.push("--access-log-format", "common") if rackup && %w[development deployment].include?(options[:environment].to_s) && !options[:quiet]
      args << File.expand_path(options[:config] || "config.ru")
    end

    def valid_options
      {
        "Host=HOST" => "Address to bind to (default: 127.0.0.1)",
        "Port=PORT" => "Port to listen on (default: 8080)",
      }
    end

    # The ruvoy binary: RUVOY_BIN, the installed gem's, or one on PATH.
    def binary
      return ENV["RUVOY_BIN"] if ENV["RUVOY_BIN"] && !ENV["RUVOY_BIN"].empty?

      begin
        return Gem.bin_path("ruvoy", "ruvoy")
      rescue Gem::Exception, LoadError
        # not installed as a gem
      end
      found = ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |dir| File.join(dir, "ruvoy") }
                 .find { |path| File.executable?(path) }
      found or abort "ruvoy: no ruvoy binary: install the ruvoy gem, put ruvoy on PATH, or set RUVOY_BIN"
    end
  end
end

# `rails server` builds the app before it calls the handler, and ruvoy then
# builds it again in its own VM: a Rails app would boot twice. Hand over
# when the server starts instead, before the app is built (Rails::Server
# asks for the handler, and so loads this file, just before it starts).
if defined?(::Rails::Server)
  early = Module.new do
    def start(*)
      return super unless options[:server].to_s == "ruvoy"

      create_tmp_directories if respond_to?(:create_tmp_directories, true)
      setup_dev_caching if respond_to?(:setup_dev_caching, true)
      # Rails says "Exiting" once its server returns; ruvoy, which replaces
      # this process, says it in its place (and so a waiting Rails process,
      # its memory with it, is not kept: cmd/ruvoy's railsExit).
      ENV["RUVOY_RAILS_SERVER"] = "1" unless options[:daemon]
      server.run(nil, **options)
    end
  end
  ::Rails::Server.prepend(early)
end
