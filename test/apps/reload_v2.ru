# Version 2 of an app a config reload swaps in.
run ->(env) { sleep 0.05; [200, { "content-type" => "text/plain" }, ["v2"]] }
