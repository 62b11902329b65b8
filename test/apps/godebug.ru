# Answers with the GODEBUG the app sees (test/sysmon_test.go): the user's
# own, whatever the server's Go runtime was started with.
use Rack::Lint
run lambda { |env|
  godebug = ENV.key?("GODEBUG") ? "GODEBUG=#{ENV["GODEBUG"]}" : "no GODEBUG"
  mark = ENV.key?("RUVOY_SYSMON_GODEBUG") ? " RUVOY_SYSMON_GODEBUG is set" : ""
  [200, { "content-type" => "text/plain" }, ["#{godebug}#{mark}\n"]]
}
