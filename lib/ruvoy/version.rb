# frozen_string_literal: true

module Ruvoy
  VERSION = "0.1.0"
end
