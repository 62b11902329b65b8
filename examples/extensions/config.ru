# Shows env["ruvoy.context"] and env["ruvoy.upstream"]; see the Caddyfile.
require "json"

run lambda { |env|
  context = env["ruvoy.context"]
  tenant = context.dynamic_metadata.dig("acme.tenant", "id")
  status, _headers, body = env["ruvoy.upstream"].call("users", "GET", "/users/42",
                                                        headers: { "accept" => "application/json" })
  answer = {
    route: context.route_name,
    tenant: tenant,
    plan: context.route_metadata.dig("acme.tenant", "plan"),
    client: context.connection["source_address"],
    user_status: status,
    user: JSON.parse(body.join),
  }
  [200, { "content-type" => "application/json" }, [JSON.generate(answer) + "\n"]]
}
