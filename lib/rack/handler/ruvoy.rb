# frozen_string_literal: true

# Rack 2 looks for the "ruvoy" server here: `rackup -s ruvoy`,
# `rails server -u ruvoy`, Rack::Handler.get("ruvoy"). rackup 2 (Rack 3)
# looks in lib/rackup/handler first, and finds this file only in its
# fallback: the handler is then rackup's.
if defined?(::Rackup::Handler) && ::Rackup::Handler.respond_to?(:[]) # rackup 2's lookup
  require_relative "../../rackup/handler/ruvoy"
  return
end
require "rack/handler"
require_relative "../../ruvoy/rack_handler"

module Rack
  module Handler
    module Ruvoy
      extend ::Ruvoy::RackHandler
    end

    register "ruvoy", "Rack::Handler::Ruvoy" # Rack 2 registers names
  end
end
