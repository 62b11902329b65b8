# frozen_string_literal: true

# async-http's server (the engine of Falcon; Debian's ruby-async-http 0.59)
# with a minimal Rack adapter of our own, since Debian packages neither
# Falcon nor protocol-rack. Each request runs in its own fiber under
# Async's scheduler, as under Falcon.
#
#   ruby bench/servers/async_http_rack.rb PORT config.ru [CERT KEY]
#
# With a certificate it serves HTTPS, HTTP/2 or HTTP/1.1 by ALPN.
require "openssl"
require "async"
require "async/http/server"
require "async/http/endpoint"
require "protocol/http/body/buffered"
require "rack"

port, rackup, cert, key = ARGV
app, = Rack::Builder.parse_file(rackup)

# A Rack body as an async-http body: it yields chunks as the app does.
class RackBody < Protocol::HTTP::Body::Readable
  def initialize(body)
    @body = body
    @chunks = body.respond_to?(:to_ary) ? body.to_ary.dup : nil
  end

  # Known for Array bodies: async-http then sends a Content-Length (it
  # writes its own framing, so the app's header is dropped below).
  def length
    @chunks&.sum(&:bytesize)
  end

  def read
    if @chunks
      @chunks.shift
    else
      @enum ||= @body.to_enum(:each)
      @enum.next
    end
  rescue StopIteration
    nil
  end

  def close(error = nil)
    @body.close if @body.respond_to?(:close)
    super
  end
end

handler = lambda do |request|
  input = request.body ? StringIO.new(request.body.join) : StringIO.new("".b)
  input.set_encoding(Encoding::BINARY)
  path, query = request.path.split("?", 2)
  host, server_port = request.authority.to_s.split(":", 2)
  env = {
    "REQUEST_METHOD" => request.method, "SCRIPT_NAME" => "", "PATH_INFO" => path,
    "QUERY_STRING" => query.to_s, "SERVER_NAME" => host || "localhost", "SERVER_PORT" => server_port || port,
    "SERVER_PROTOCOL" => request.version, "REMOTE_ADDR" => "127.0.0.1",
    "rack.version" => [1, 3], "rack.url_scheme" => cert ? "https" : "http", "rack.input" => input, "rack.errors" => $stderr,
    "rack.multithread" => false, "rack.multiprocess" => false, "rack.run_once" => false, "rack.hijack?" => false,
  }
  request.headers.each do |name, value|
    key = name.upcase.tr("-", "_")
    case key
    when "CONTENT_TYPE", "CONTENT_LENGTH" then env[key] = value
    else env["HTTP_#{key}"] = value
    end
  end
  status, headers, body = app.call(env)
  fields = headers.reject { |k, _| k.downcase == "content-length" }
                  .flat_map { |k, v| v.to_s.split("\n").map { |x| [k.downcase, x] } }
  Protocol::HTTP::Response[status, Protocol::HTTP::Headers[fields], RackBody.new(body)]
end

endpoint =
  if cert
    context = OpenSSL::SSL::SSLContext.new
    context.cert = OpenSSL::X509::Certificate.new(File.read(cert))
    context.key = OpenSSL::PKey.read(File.read(key))
    context.alpn_protocols = %w[h2 http/1.1]
    context.alpn_select_cb = ->(offered) { (%w[h2 http/1.1] & offered).first }
    Async::HTTP::Endpoint.parse("https://127.0.0.1:#{port}", ssl_context: context)
  else
    Async::HTTP::Endpoint.parse("http://127.0.0.1:#{port}")
  end

Async do
  Async::HTTP::Server.for(endpoint, &handler).run
end
