# frozen_string_literal: true

# YJIT's own memory in each process of a server, for bench/run's YJIT
# table: loaded into every server of a run with RUBYOPT=-r (ruvoy's
# embedded VM reads RUBYOPT as ruby does), it writes, once a second,
# RubyVM::YJIT.runtime_stats' sizes to RUVOY_BENCH_YJIT_STATS/PID, while
# YJIT is on in the process. A forked worker (Puma's and ruvoy's
# --preload) starts its own writer: threads do not survive a fork.
module RuvoyBenchYJITStats
  KEYS = %i[code_region_size yjit_alloc_size inline_code_size outlined_code_size compiled_iseq_count].freeze

  def self.start
    dir = ENV["RUVOY_BENCH_YJIT_STATS"]
    return unless dir && defined?(RubyVM::YJIT)

    Thread.new do
      loop do
        sleep 1
        write(dir) if RubyVM::YJIT.enabled?
      end
    end
  end

  def self.write(dir)
    stats = RubyVM::YJIT.runtime_stats || {}
    lines = KEYS.map { |k| "#{k} #{stats[k].to_i}\n" }.join
    path = File.join(dir, Process.pid.to_s)
    File.write("#{path}.tmp", lines)
    File.rename("#{path}.tmp", path)
  rescue StandardError
    nil
  end

  module Fork
    def _fork
      pid = super
      RuvoyBenchYJITStats.start if pid.zero?
      pid
    end
  end
end

Process.singleton_class.prepend(RuvoyBenchYJITStats::Fork) if Process.respond_to?(:_fork)
RuvoyBenchYJITStats.start
