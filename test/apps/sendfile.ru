# X-Sendfile as Rails makes it: Rack::Sendfile turns a file body into an
# X-Sendfile header and an empty body (test/frameworks_test.go).
class FileBody
  def initialize(path) = @path = path
  def to_path = @path
  def each = yield(File.binread(@path))
end

use Rack::Sendfile, "X-Sendfile"
run lambda { |env|
  path = ENV.fetch(env["PATH_INFO"] == "/outside" ? "SENDFILE_OUTSIDE" : "SENDFILE_INSIDE")
  case env["PATH_INFO"]
  when "/range" # an app's own partial answer: the range it names, of the file
    [206, { "content-type" => "text/plain", "content-range" => "bytes #{env["QUERY_STRING"]}" }, FileBody.new(path)]
  when "/missing" # a custom error page sent from a file, as Rails' send_file(status: 404)
    [404, { "content-type" => "text/plain" }, FileBody.new(path)]
  else
    [200, { "content-type" => "text/plain" }, FileBody.new(path)]
  end
}
