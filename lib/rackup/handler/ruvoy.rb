# frozen_string_literal: true

# Rack 3's rackup (2.x) looks for the "ruvoy" server here:
# `rackup -s ruvoy`, `rails server -u ruvoy`, Rackup::Handler.get("ruvoy").
require "rackup/handler"
require_relative "../../ruvoy/rack_handler"

module Rackup
  module Handler
    module Ruvoy
      extend ::Ruvoy::RackHandler
    end

    register :ruvoy, Ruvoy
  end
end
