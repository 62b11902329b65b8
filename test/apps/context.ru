# Answers with env["ruvoy.context"] as JSON (test/ship_test.go).
require "json"
run ->(env) { [200, { "content-type" => "application/json" }, [JSON.generate(env["ruvoy.context"]&.to_h)]] }
