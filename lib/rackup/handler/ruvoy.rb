# frozen_string_literal: true

# Rack 3's rackup (2.x) looks for the "ruvoy" server here:
# `rackup -s ruvoy`, `rails server -u ruvoy`, Rackup::Handler.get("ruvoy").
require "rackup/handler"
require_relative "../../ruvoy/rack_handler"

Rackup::Handler.const_set(:Ruvoy, Ruvoy::RackHandler) unless Rackup::Handler.const_defined?(:Ruvoy, false)
Rackup::Handler.register(:ruvoy, Ruvoy::RackHandler)
