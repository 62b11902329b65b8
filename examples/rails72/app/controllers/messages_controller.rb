# POST /rooms/:room_id/messages broadcasts a message to the room's
# subscribers (RoomChannel); nothing is stored.
class MessagesController < ApplicationController
  def create
    room, body = params[:room_id].to_s, params[:body].to_s
    return head :not_found unless Room.valid_name?(room)
    return render(json: { error: "body is empty" }, status: :unprocessable_entity) if body.strip.empty?

    ActionCable.server.broadcast(RoomChannel.broadcasting_for_room(room), { room: room, body: body })
    head :no_content
  end
end
