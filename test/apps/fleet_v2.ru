# Version 2 of the fleet's app (fleet_app.rb): what the rolling deploy
# brings.
require "rack/lint"
require_relative "fleet_app"

use Rack::Lint
run FleetApp.new("v2")
