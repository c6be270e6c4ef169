module @tp {
  func.func public @main(%v0: tensor<4xi32>, %v1: tensor<3xi64>, %v2: tensor<3xi32>) -> (tensor<4xi32>) {
    %v3 = "stablehlo.constant"() {value = dense<0> : tensor<i64>} : () -> tensor<i64>
    %v4 = "stablehlo.broadcast_in_dim"(%v3) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3xi64>
    %v5 = "stablehlo.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %v6 = "stablehlo.broadcast_in_dim"(%v5) {broadcast_dimensions = array<i64>} : (tensor<i64>) -> tensor<3xi64>
    %v7 = "stablehlo.multiply"(%v1, %v6) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
    %v8 = "stablehlo.add"(%v4, %v7) : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
    %v9 = "stablehlo.constant"() {value = dense<false> : tensor<i1>} : () -> tensor<i1>
    %v10 = "stablehlo.broadcast_in_dim"(%v9) {broadcast_dimensions = array<i64>} : (tensor<i1>) -> tensor<4xi1>
    %v11 = "stablehlo.constant"() {value = dense<true> : tensor<i1>} : () -> tensor<i1>
    %v12 = "stablehlo.broadcast_in_dim"(%v11) {broadcast_dimensions = array<i64>} : (tensor<i1>) -> tensor<3xi1>
    %v13 = "stablehlo.scatter"(%v10, %v8, %v12) ({
      ^bb0(%v14: tensor<i1>, %v15: tensor<i1>):
        %v16 = "stablehlo.or"(%v14, %v15) : (tensor<i1>, tensor<i1>) -> tensor<i1>
        "stablehlo.return"(%v16) : (tensor<i1>) -> ()
    }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<4xi1>, tensor<3xi64>, tensor<3xi1>) -> tensor<4xi1>
    %v17 = "stablehlo.constant"() {value = dense<-2147483648> : tensor<i32>} : () -> tensor<i32>
    %v18 = "stablehlo.broadcast_in_dim"(%v17) {broadcast_dimensions = array<i64>} : (tensor<i32>) -> tensor<4xi32>
    %v19 = "stablehlo.select"(%v13, %v18, %v0) : (tensor<4xi1>, tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %v20 = "stablehlo.scatter"(%v19, %v8, %v2) ({
      ^bb0(%v21: tensor<i32>, %v22: tensor<i32>):
        %v23 = "stablehlo.maximum"(%v21, %v22) : (tensor<i32>, tensor<i32>) -> tensor<i32>
        "stablehlo.return"(%v23) : (tensor<i32>) -> ()
    }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, indices_are_sorted = false, unique_indices = false} : (tensor<4xi32>, tensor<3xi64>, tensor<3xi32>) -> tensor<4xi32>
    "func.return"(%v20) : (tensor<4xi32>) -> ()
  }
}
