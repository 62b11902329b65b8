# frozen_string_literal: true

# require "ruvoy" (Bundler.require does, with gem "ruvoy" in a Gemfile).
# Inside the server the runtime embedded in the binary is already loaded and
# defines all of Ruvoy. Outside it (rake tasks, consoles, another server),
# Ruvoy.offload and Ruvoy::Offload run their block where they are called,
# and the fork hooks (Ruvoy.before_fork, on_worker_boot, on_worker_shutdown)
# keep their blocks without running them, and Ruvoy.warm does nothing, so
# code written for ruvoy runs unchanged.
require_relative "ruvoy/version"

module Ruvoy
  unless respond_to?(:offload)
    def self.offload
      yield
    end

    class Offload
      attr_reader :limit

      def initialize(limit:)
        @limit = limit
      end

      def call
        yield
      end
    end
  end

  unless respond_to?(:on_worker_boot)
    def self.before_fork(&block); end

    def self.on_worker_boot(&block); end

    def self.on_worker_shutdown(&block); end

    def self.warm(*_paths, times: 10, env: {}) = {}
  end
end
