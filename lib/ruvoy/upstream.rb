# frozen_string_literal: true

module Ruvoy
  # env["ruvoy.upstream"]: calls to upstreams through the server's
  # own reverse proxy (its pools, TLS, load balancing, health checks and
  # retries). The calling fiber waits in the scheduler; other requests go on,
  # and calls made from separate fibers (Fiber.schedule) overlap.
  #
  #   status, headers, body = env["ruvoy.upstream"].call(
  #     "users", "GET", "/users/42", headers: { "accept" => "application/json" }, timeout: 2)
  #
  # An answer made while the call was under way comes back as a response:
  # 504 when it timed out, 503 when the upstream could not be reached or hung
  # up. Ruvoy::UpstreamError is raised when the call could not be made
  # (unknown upstream, no healthy host, turned away at once), when the
  # answer is larger than max_response_bytes, or when the request finished
  # first. Only the upstreams the app's config lists can be called
  # (ArgumentError).
  class Upstream
    attr_reader :upstreams

    def initialize(stream_id, upstreams)
      @stream_id = stream_id
      @upstreams = upstreams
    end

    # What #upstreams was called before.
    def clusters
      warn "Ruvoy::Upstream#clusters is deprecated: use #upstreams", uplevel: 1
      upstreams
    end

    def call(upstream, method, path, headers: {}, body: nil, timeout: nil)
      upstream = upstream.to_s
      unless @upstreams.include?(upstream)
        raise ArgumentError, "upstream #{upstream.inspect} is not one this app may call (#{@upstreams.join(", ")})"
      end
      raise ArgumentError, "path must start with /" unless path.start_with?("/")

      pairs = headers.flat_map { |name, value| Array(value).map { |v| [name.to_s, v.to_s] } }
      timeout_ms = timeout ? (timeout * 1000).ceil : 0
      status, answer_headers, answer = Ruvoy._upstream(@stream_id, upstream, method.to_s.upcase, path, pairs,
                                                       body&.to_s, timeout_ms)
      [status, group(answer_headers), [answer]]
    end

    private

    # Repeated headers become Arrays; names are lower case.
    def group(pairs)
      pairs.each_with_object({}) do |(name, value), h|
        key = name.downcase
        h[key] = h.key?(key) ? Array(h[key]) << value : value
      end
    end
  end
end
