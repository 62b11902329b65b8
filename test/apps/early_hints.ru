# frozen_string_literal: true

# A page that names its stylesheet in a 103 Early Hints answer (unless
# ?nohints), thinks for ?think seconds, then answers; the stylesheet
# takes ?css seconds. /report?run=ID says whether the browser asked for
# the stylesheet before the page had answered (it acted on the hint), and
# how many times (a preload it could not use is asked for again).
require "rack/lint"
use Rack::Lint

runs = Hash.new { |h, k| h[k] = {} }
now = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
run lambda { |env|
  q = Rack::Utils.parse_query(env["QUERY_STRING"])
  id = q.fetch("run", "")
  css = "/style.css?run=#{Rack::Utils.escape(id)}&css=#{q["css"].to_f}"
  case env["PATH_INFO"]
  when "/page"
    env["rack.early_hints"]&.call("link" => "<#{css}>; rel=preload; as=style") unless q["nohints"]
    sleep q["think"].to_f
    runs[id][:answered] = now.call
    html = "<!doctype html><html><head><link rel=\"stylesheet\" href=\"#{Rack::Utils.escape_html(css)}\"></head>" \
           "<body><p>early hints</p></body></html>\n"
    [200, { "content-type" => "text/html; charset=utf-8", "cache-control" => "no-store" }, [html]]
  when "/style.css"
    runs[id][:asked] ||= now.call
    runs[id][:css] = runs[id].fetch(:css, 0) + 1
    sleep q["css"].to_f
    [200, { "content-type" => "text/css", "cache-control" => "max-age=3600" }, ["p { color: green }\n"]]
  when "/report"
    r = runs[id]
    early = r[:asked] && r[:answered] && r[:asked] < r[:answered]
    [200, { "content-type" => "text/plain" }, ["#{early ? "asked before" : "asked after"} the answer, #{r[:css]} request(s)"]]
  else
    [404, { "content-type" => "text/plain" }, ["not found\n"]]
  end
}
