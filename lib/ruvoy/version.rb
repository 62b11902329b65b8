# frozen_string_literal: true

module Ruvoy
  VERSION = "0.1.0" unless const_defined?(:VERSION, false) # the server defines it before a gem's copy loads
end
