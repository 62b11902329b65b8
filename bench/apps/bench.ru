# The fixtures every server in the benchmark serves (bench/main.go).
run lambda { |env|
  case env["PATH_INFO"]
  when "/"
    [200, { "content-type" => "text/plain" }, ["hello world\n"]]
  when "/stream"
    # First chunk at once, the rest after 50 ms: time to first byte shows
    # whether a server forwards chunks as they come.
    [200, { "content-type" => "text/plain" }, Enumerator.new { |y| y << "first\n"; sleep 0.05; y << "second\n" }]
  when "/upload"
    input = env["rack.input"]
    size = 0
    buf = String.new
    size += buf.bytesize while input.read(65536, buf)
    [200, { "content-type" => "text/plain" }, [size.to_s]]
  when "/wait50"
    sleep 0.05
    [200, { "content-type" => "text/plain" }, ["waited\n"]]
  else
    [404, { "content-type" => "text/plain" }, ["not found\n"]]
  end
}
