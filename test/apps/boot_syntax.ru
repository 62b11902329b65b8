run ->( {
