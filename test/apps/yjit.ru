# The YJIT tests' app (test/yjit_test.go): whether YJIT is on in the
# process that answers, and how much machine code it has made there.
require "json"

# Called often enough (YJIT compiles a method after 30 calls) that every
# answering process has compiled code once it has served a request.
def squares(n)
  (1..n).reduce(0) { |sum, i| sum + i * i }
end

run lambda { |env|
  req = Rack::Request.new(env)
  sleep Float(req.params["sleep"]) if req.params["sleep"]
  200.times { squares(50) }
  on = defined?(RubyVM::YJIT) ? RubyVM::YJIT.enabled? : false
  stats = on ? RubyVM::YJIT.runtime_stats : nil
  code = stats ? stats[:inline_code_size].to_i : 0
  [200, { "content-type" => "application/json" },
   [JSON.generate(pid: Process.pid, yjit: on, code: code, ruby: RUBY_VERSION)]]
}
