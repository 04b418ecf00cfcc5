"""What runs without anyone asking: the sensor that processes each dump once it is downloaded."""
