# GET /rooms/:id: a page that subscribes to the room (RoomChannel) and
# shows what is broadcast to it. GET /action_cable.js: Action Cable's own
# client, as the actioncable gem ships it (there is no asset pipeline).
class RoomsController < ApplicationController
  CLIENT = ActionCable::Engine.root.join("app", "assets", "javascripts", "action_cable.js")

  # Rails refuses JavaScript to a <script> tag (GET, not XHR) lest another
  # site read it; this script is public and the same for everyone.
  skip_forgery_protection only: :client

  def show
    @room = params[:id].to_s
    head :not_found unless Room.valid_name?(@room)
  end

  def client
    expires_in 1.hour, public: true
    send_file CLIENT, type: "text/javascript", disposition: "inline"
  end
end
