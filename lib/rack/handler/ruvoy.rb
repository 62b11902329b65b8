# frozen_string_literal: true

# Rack 2 looks for the "ruvoy" server here: `rackup -s ruvoy`,
# `rails server -u ruvoy`, Rack::Handler.get("ruvoy"). Under rackup 2
# (Rack 3), whose Rack::Handler is deprecated, the handler is rackup's.
if defined?(::Rackup::Handler) && !defined?(::Rack::Handler)
  require_relative "../../rackup/handler/ruvoy"
else
  require "rack/handler"
  require_relative "../../ruvoy/rack_handler"

  Rack::Handler.const_set(:Ruvoy, Ruvoy::RackHandler) unless Rack::Handler.const_defined?(:Ruvoy, false)
  Rack::Handler.register("ruvoy", "Rack::Handler::Ruvoy")
end
