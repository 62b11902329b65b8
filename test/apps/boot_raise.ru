def build
  raise ArgumentError, "boom while building the app"
end
run build
