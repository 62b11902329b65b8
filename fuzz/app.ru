# The app the HTTP/1 fuzzer drives (fuzz/main.go). It reads every body
# whole, remembers every request target it is called for, and answers with
# what it saw, so that the fuzzer can compare it with what a correct parser
# sees in the bytes it sent.
require "digest"
require "set"

SEEN = Set.new

run lambda { |env|
  target = env["REQUEST_URI"]
  if env["PATH_INFO"] == "/seen"
    next [200, { "content-type" => "text/plain" }, [SEEN.include?(env["QUERY_STRING"]) ? "yes" : "no"]]
  end
  SEEN << target
  body = env["rack.input"].read
  [200, { "content-type" => "text/plain" },
   ["#{env["REQUEST_METHOD"]} #{target} #{body.bytesize} #{Digest::SHA256.hexdigest(body)}"]]
}
