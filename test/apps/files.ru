# File bodies (test/filebody_test.go) from FILES_ROOT: Rack::Files under
# /files, and behind Rack::Sendfile (X-Sendfile) under /x. Rack::Lint 2.2
# hides a body's to_path, which is what these routes are about, so they
# are not linted; /linted is the same files through Lint (the body then
# goes out by each, as any other).
root = ENV.fetch("FILES_ROOT")
map "/files" do
  run Rack::Files.new(root)
end
map "/x" do
  use Rack::Sendfile, "X-Sendfile"
  run Rack::Files.new(root)
end
map "/linted" do
  run Rack::Lint.new(Rack::Files.new(root))
end
