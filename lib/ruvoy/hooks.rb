# frozen_string_literal: true

module Ruvoy
  # The app's code around the fork of --preload and around each worker's
  # life, as Puma's before_fork, before_worker_boot and
  # before_worker_shutdown (docs/cli.md): registered from config.ru or a
  # Rails initializer while the app loads; run on the VM thread by
  # rv_hooks.c when Go asks (RV_IN_HOOKS) and as the VM stops.
  HOOKS = { before_fork: [], on_worker_boot: [], on_worker_shutdown: [] }.freeze

  # In the --preload template, once the app has loaded and before it forks
  # any worker: close what the workers must not share (connections,
  # files, threads). Never runs without --preload, nor in one process.
  def self.before_fork(&block)
    add_hook(:before_fork, block)
  end

  # In each worker before it serves, forked or started anew (a worker's
  # replacement and a rolling restart's new workers too), given the
  # worker's index (0 to N-1); in one process once, given 0, before it
  # serves. A block that raises fails that worker's boot.
  def self.on_worker_boot(&block)
    add_hook(:on_worker_boot, block)
  end

  # In a worker as it stops, once its requests have ended (a stop, a
  # rolling restart, a replacement under --worker-max-rss), given its index;
  # in one process as it stops. Not in a worker that was killed or crashed.
  def self.on_worker_shutdown(&block)
    add_hook(:on_worker_shutdown, block)
  end

  # In a before_fork block: serves the app requests for each path, times
  # times, in the template itself, before any worker is forked, as Puma's
  # fork_worker and Pitchfork's refork share a warmed worker. What a first
  # request makes (Rails' compiled templates and lazily built caches,
  # YJIT's machine code where YJIT is on) is then made once, in pages the
  # workers share, not again in each worker. The requests are Rack env
  # Hashes (Rack::MockRequest.env_for; env adds to each), called on the
  # template's VM thread one at a time; their answers are dropped. Active
  # Record's connections they opened are closed after, so that the template
  # holds none. Returns each path's statuses, { "/articles" => [200] }.
  # Outside a template (one process, workers started anew) it does nothing
  # and returns {}.
  def self.warm(*paths, times: 10, env: {})
    return {} unless @template && @app

    require "rack/mock"
    statuses = Hash.new { |h, k| h[k] = [] }
    paths.each do |path|
      times.times do
        status, _headers, body = @app.call(Rack::MockRequest.env_for(path, { "HTTP_HOST" => "localhost" }.merge(env)))
        body.each { |_chunk| } if body.respond_to?(:each)
        body.close if body.respond_to?(:close)
        statuses[path] << status.to_i unless statuses[path].include?(status.to_i)
      end
    end
    if defined?(ActiveRecord::Base) && ActiveRecord::Base.respond_to?(:connection_handler)
      ActiveRecord::Base.connection_handler.connection_pool_list.each(&:disconnect!)
    end
    statuses.to_h
  end

  class << self
    private

    def add_hook(name, block)
      raise ArgumentError, "Ruvoy.#{name} needs a block" unless block

      hooks = HOOKS[name]
      # A config reload evaluates config.ru again in the same process: the
      # blocks it registers again are the ones it registered the first time.
      return if @apps_loaded && hooks.any? { |b| b.source_location == block.source_location }

      hooks << block
      nil
    end
  end

  # Counted by load_app: registrations after the first load are a reload's.
  def self._app_loaded
    @apps_loaded = true
  end

  # RV_IN_HOOKS, RV_HOOKS_BEFORE_FORK: in a template. Raises what a block
  # raised.
  def self._before_fork
    @template = true
    HOOKS[:before_fork].each(&:call)
    nil
  end

  # RV_IN_HOOKS, RV_HOOKS_WORKER_BOOT: before this process serves. Each
  # block runs once in a process: after a config reload (one process), only
  # the blocks the new app added. Raises what a block raised.
  def self._worker_boot(index)
    @worker_index = index
    hooks = HOOKS[:on_worker_boot]
    @booted ||= 0
    while @booted < hooks.size
      hook = hooks[@booted]
      @booted += 1
      hook.call(index)
    end
    nil
  end

  # As the VM stops (rv_boot.c), where the boot hooks ran (a worker, the
  # one process; not a template): every block runs, whatever the others
  # raise. Returns what they raised, for the log.
  def self._worker_shutdown
    return [] unless @worker_index

    HOOKS[:on_worker_shutdown].filter_map do |hook|
      hook.call(@worker_index)
      nil
    rescue Exception => e # rubocop:disable Lint/RescueException -- logged, and the stop goes on
      e
    end
  end
end
