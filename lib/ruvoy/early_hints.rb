# frozen_string_literal: true

module Ruvoy
  # env["rack.early_hints"]: call it with a Hash of headers (Rails'
  # request.send_early_hints gives {"Link" => "<...>; rel=preload, ..."})
  # to send a 103 Early Hints answer before the response. Hints sent once
  # the response has begun, or from a fiber other than the request's own,
  # are dropped: they are only hints.
  EARLY_HINTS = lambda do |headers|
    id = Ruvoy._current_request
    Ruvoy._early_hints(id, headers) if id
    nil
  end
end
