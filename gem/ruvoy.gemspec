# frozen_string_literal: true

# The ruvoy gem: the ruvoy binary for one Ruby ABI and platform, its
# launcher, the Rack handler (rackup -s ruvoy, rails server -u ruvoy), and
# Ruvoy.offload stand-ins for code run outside the server. `make gem` stages
# the files next to this spec and builds pkg/ruvoy-VERSION-PLATFORM.gem.
require_relative "lib/ruvoy/version"

abi = File.read(File.join(__dir__, "libexec", "RUBY_ABI")).split

Gem::Specification.new do |spec|
  spec.name = "ruvoy"
  spec.version = Ruvoy::VERSION
  spec.summary = "Serve Rack apps from a Ruby VM embedded in Caddy"
  spec.description = "ruvoy runs Rack applications (Rails, Sinatra, any config.ru) in a CRuby VM embedded " \
                     "in the Caddy web server: HTTP/1.1, HTTP/2, HTTP/3 and TLS from Caddy, a fiber per request."
  spec.authors = ["The ruvoy developers"]
  spec.license = "Apache-2.0"
  spec.homepage = "https://github.com/ruvoy/ruvoy"
  spec.platform = Gem::Platform.new(abi[1])
  spec.required_ruby_version = "~> #{abi[0]}"
  spec.metadata = { "ruby_abi" => abi[0], "ruby_platform" => abi[2] }
  spec.files = Dir["exe/ruvoy", "libexec/ruvoy", "libexec/RUBY_ABI", "lib/**/*.rb", "README.md"]
  spec.bindir = "exe"
  spec.executables = ["ruvoy"]
  spec.require_paths = ["lib"]
end
