# A warmed template, for +warm servers (RUVOY_BENCH_WARM=1; bench/waits.go):
# under ruvoy --preload the template serves the pages the scenarios ask
# for before it forks any worker (Ruvoy.warm, docs/cli.md), so that the
# workers share what those pages' first requests make.
if ENV["RUVOY_BENCH_WARM"] && defined?(Ruvoy) && Ruvoy.respond_to?(:warm)
  paths = ["/articles", "/articles/1.json"]
  paths += ["/waits/db?ms=0", "/waits/http"] if File.exist?(File.join(__dir__, "../../app/controllers/waits_controller.rb"))
  Ruvoy.before_fork { Ruvoy.warm(*paths, times: 50) }
end
