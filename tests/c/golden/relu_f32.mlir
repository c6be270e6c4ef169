module @tp {
  func.func public @main(%v0: tensor<5xf32>) -> (tensor<5xf32>) {
    %v1 = "stablehlo.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
    %v2 = "stablehlo.broadcast_in_dim"(%v1) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<5xf32>
    %v3 = "stablehlo.compare"(%v0, %v2) {comparison_direction = #stablehlo<comparison_direction GT>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
    %v4 = "stablehlo.compare"(%v0, %v0) {comparison_direction = #stablehlo<comparison_direction NE>, compare_type = #stablehlo<comparison_type FLOAT>} : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xi1>
    %v5 = "stablehlo.or"(%v3, %v4) : (tensor<5xi1>, tensor<5xi1>) -> tensor<5xi1>
    %v6 = "stablehlo.select"(%v5, %v0, %v2) : (tensor<5xi1>, tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
    "func.return"(%v6) : (tensor<5xf32>) -> ()
  }
}
