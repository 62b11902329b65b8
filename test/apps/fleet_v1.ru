# Version 1 of the fleet's app (fleet_app.rb).
require "rack/lint"
require_relative "fleet_app"

use Rack::Lint
run FleetApp.new("v1")
