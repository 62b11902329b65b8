# The app the context and upstream tests talk to (test/extensions_test.go).
require "json"

def json(value, status = 200) = [status, { "content-type" => "application/json" }, [JSON.generate(value)]]

def call(env, upstream, path, **options)
  status, headers, body = env["ruvoy.upstream"].call(upstream, "GET", path, **options)
  { "status" => status, "headers" => headers, "body" => body.join }
end

app = lambda do |env|
  query = Rack::Utils.parse_query(env["QUERY_STRING"])
  case env["PATH_INFO"]
  when "/context"
    context = env["ruvoy.context"]
    json("to_h" => context.to_h, "route_name" => context.route_name, "tls" => context.tls,
         "connection" => context.connection, "dynamic_metadata" => context.dynamic_metadata,
         "route_metadata" => context.route_metadata)
  when "/user"
    json(call(env, "users", "/users/#{query.fetch("id")}", headers: { "accept" => "application/json" }))
  when "/two-slow"
    began = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    results = []
    fibers = 2.times.map do |i|
      Fiber.schedule { results << call(env, "users", "/slow?ms=300&n=#{i}")["body"] }
    end
    sleep 0.001 until results.size == 2
    json("bodies" => results.sort, "seconds" => Process.clock_gettime(Process::CLOCK_MONOTONIC) - began)
  when "/timeout" then json(call(env, "users", "/slow?ms=2000", timeout: 0.2))
  when "/stopped" then json(call(env, "stopped", "/anything"))
  when "/big"
    begin
      json(call(env, "users", "/big"))
    rescue Ruvoy::UpstreamError => e
      json("error" => e.class.name, "message" => e.message)
    end
  when "/unlisted"
    begin
      json(call(env, "billing", "/x"))
    rescue ArgumentError => e
      json("error" => e.class.name, "message" => e.message)
    end
  when "/undefined"
    begin
      json(call(env, "ghost", "/x"))
    rescue Ruvoy::UpstreamError => e
      json("error" => e.class.name, "message" => e.message)
    end
  when "/leave" then json(call(env, "users", "/slow?ms=3000"))
  else json({ "error" => "not found" }, 404)
  end
end

use Rack::Lint
run app
