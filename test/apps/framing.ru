# The app whose answers the framing test compares, byte for byte, under
# ruvoy and Puma (test/frameworks_test.go): bodies of each shape a Rack
# app gives, with and without a content-length of its own, and the
# statuses that have no body.
require "rack/lint"

text = { "content-type" => "text/plain" }

use Rack::Lint
run lambda { |env|
  case env["PATH_INFO"]
  when "/one" then [200, text, ["one part\n"]]
  when "/parts" then [200, text, ["several ", "parts ", "of one body\n"]]
  when "/empty" then [200, text, []]
  when "/sized" then [200, text.merge("content-length" => "6"), ["sized\n"]]
  when "/stream"
    [200, text, Enumerator.new { |y| 3.times { |i| y << "chunk #{i}\n" } }]
  when "/closed" then [200, text.merge("connection" => "close"), ["the app asks to close\n"]]
  when "/no-content" then [204, {}, []]
  when "/not-modified" then [304, { "etag" => '"v1"' }, []]
  when "/redirect" then [302, text.merge("location" => "/one"), ["moved\n"]]
  else [404, text, ["not found\n"]]
  end
}
