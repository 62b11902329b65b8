# X-Sendfile as Rails makes it: Rack::Sendfile turns a file body into an
# X-Sendfile header and an empty body (test/frameworks_test.go).
class FileBody
  def initialize(path) = @path = path
  def to_path = @path
  def each = yield(File.binread(@path))
end

use Rack::Sendfile, "X-Sendfile"
run lambda { |env|
  path = ENV.fetch(env["PATH_INFO"] == "/inside" ? "SENDFILE_INSIDE" : "SENDFILE_OUTSIDE")
  [200, { "content-type" => "text/plain" }, FileBody.new(path)]
}
