# The smallest app: `ruvoy examples/hello/config.ru`, then curl localhost:8080
run ->(env) { [200, { "content-type" => "text/plain" }, ["hello from ruby #{RUBY_VERSION}\n"]] }
