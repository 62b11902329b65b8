# An app that tries to take the server's signals at boot.
Signal.trap("TERM") { puts "the app's TERM trap ran" }
trap("INT") { puts "the app's INT trap ran" }
Signal.trap("WINCH") { puts "the app's WINCH trap ran" }
at_exit { puts "trap.ru at_exit ran" }
$stdout.sync = true
run ->(env) { sleep 0.5 if env["PATH_INFO"] == "/slow"; [200, { "content-type" => "text/plain" }, ["ok"]] }
