# frozen_string_literal: true

require "json"

module Ruvoy
  # env["ruvoy.context"]: what the server knows about a request beyond Rack,
  # copied by Go when the headers arrived and turned into Ruby values only
  # when first read. Values are Strings, Integers, booleans, nil, and Arrays
  # and Hashes of those; anything else the server had is left out.
  class Context
    def initialize(json)
      @json = json
      @data = nil
    end

    # The route's name (the ruvoy handler's route_name), or nil.
    def route_name = data["route_name"]

    # {"id", "source_address", "source_port", "destination_address", "destination_port"}
    def connection = data["connection"]

    # nil over plaintext; else {"version", "cipher", "server_name", "alpn",
    # "peer_certificate" (PEM or nil), "uri_san", "dns_san"}.
    def tls = data["tls"]

    # Caddy vars set ahead of ruvoy, in the configured namespaces.
    def dynamic_metadata = data["dynamic_metadata"]

    # The route's static metadata, in the configured namespaces.
    def route_metadata = data["route_metadata"]

    def to_h = data.dup

    def inspect = "#<Ruvoy::Context #{data.inspect}>"

    private

    def data
      @data ||= JSON.parse(@json).freeze
    end
  end
end
